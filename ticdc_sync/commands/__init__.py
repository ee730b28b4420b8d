"""The commands, the top floor: `cli` turns argv into an exit code and calls the floors
below; `status` is `ticdc-sync status`. Nothing in the package imports this folder.
"""
