-- Upstream schema of TiDB database `shop`, as of the start of the captures.
-- Later DDL arrives through the changefeeds.
USE shop;

CREATE TABLE customers (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  email VARCHAR(255) NOT NULL,
  full_name VARCHAR(100) NOT NULL,
  tier ENUM('bronze','silver','gold') NOT NULL DEFAULT 'bronze',
  phone VARCHAR(32) NULL,
  notes TEXT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  UNIQUE KEY uk_customers_email (email)
);

CREATE TABLE items (
  id INT NOT NULL AUTO_INCREMENT,
  sku VARCHAR(64) NOT NULL,
  title VARCHAR(200) NOT NULL,
  description TEXT NULL,
  price DECIMAL(12,2) NOT NULL,
  weight_kg DECIMAL(8,3) NULL,
  stock INT NOT NULL DEFAULT 0,
  created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  UNIQUE KEY uk_items_sku (sku)
);

CREATE TABLE orders (
  id BIGINT NOT NULL AUTO_INCREMENT,
  customer_id BIGINT UNSIGNED NOT NULL,
  item_id INT NOT NULL,
  quantity SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  total DECIMAL(14,2) NOT NULL,
  discount DECIMAL(5,4) NULL,
  note VARCHAR(500) NULL,
  placed_at DATETIME(6) NOT NULL,
  shipped_at DATETIME NULL,
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY idx_orders_customer (customer_id)
);
