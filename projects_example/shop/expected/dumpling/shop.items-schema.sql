/*!40101 SET NAMES binary*/;
CREATE TABLE `items` (
  `id` int NOT NULL,
  `sku` varchar(64) NOT NULL,
  `title` varchar(200) NOT NULL,
  `description` text,
  `price` decimal(12,2) NOT NULL,
  `weight_kg` decimal(8,3),
  `stock` int NOT NULL DEFAULT '0',
  `created_at` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,
  UNIQUE KEY `uk_0` (`sku`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
