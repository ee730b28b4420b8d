/*!40101 SET NAMES binary*/;
CREATE TABLE `orders` (
  `id` bigint NOT NULL,
  `customer_id` bigint unsigned NOT NULL,
  `item_id` int NOT NULL,
  `quantity` smallint unsigned NOT NULL DEFAULT '1',
  `status` enum('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  `total` decimal(14,2) NOT NULL,
  `discount` decimal(5,4),
  `note` varchar(500),
  `placed_at` datetime(6) NOT NULL,
  `shipped_at` datetime,
  `updated_at` timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `c_added1` varchar(20) DEFAULT 'd1',
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
