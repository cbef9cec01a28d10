-- Retail: customers, their orders and order lines, returns, refunds and escalations to a human.
CREATE TABLE customers (
  id TEXT PRIMARY KEY,                  -- C0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  phone TEXT NOT NULL,
  address TEXT NOT NULL,
  zip TEXT NOT NULL,
  tier TEXT NOT NULL CHECK (tier IN ('regular', 'gold')),
  created_at TEXT NOT NULL
);
CREATE TABLE payment_methods (
  id TEXT PRIMARY KEY,                  -- PM00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  kind TEXT NOT NULL CHECK (kind IN ('card', 'gift_card', 'paypal')),
  last4 TEXT,
  balance REAL                          -- gift cards only
);
CREATE TABLE products (
  id TEXT PRIMARY KEY,                  -- P0001
  name TEXT NOT NULL,
  category TEXT NOT NULL,
  price REAL NOT NULL,
  stock INTEGER NOT NULL
);
CREATE TABLE orders (
  id TEXT PRIMARY KEY,                  -- W10001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'shipped', 'delivered', 'cancelled')),
  placed_at TEXT NOT NULL,
  shipped_at TEXT,
  delivered_at TEXT,
  shipping_address TEXT NOT NULL,
  payment_method_id TEXT NOT NULL REFERENCES payment_methods(id),
  total REAL NOT NULL,
  cancel_reason TEXT,
  updated_at TEXT NOT NULL
);
CREATE TABLE order_items (
  order_id TEXT NOT NULL REFERENCES orders(id),
  line INTEGER NOT NULL,
  product_id TEXT NOT NULL REFERENCES products(id),
  quantity INTEGER NOT NULL CHECK (quantity > 0),
  unit_price REAL NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ordered', 'return_requested', 'returned', 'exchanged')),
  PRIMARY KEY (order_id, line)
);
CREATE TABLE returns (
  id TEXT PRIMARY KEY,                  -- RT00001
  order_id TEXT NOT NULL REFERENCES orders(id),
  line INTEGER NOT NULL,
  quantity INTEGER NOT NULL CHECK (quantity > 0),
  reason TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('requested', 'received', 'rejected')),
  requested_at TEXT NOT NULL,
  received_at TEXT
);
CREATE TABLE refunds (
  id TEXT PRIMARY KEY,                  -- RF00001
  order_id TEXT NOT NULL REFERENCES orders(id),
  return_id TEXT REFERENCES returns(id),
  amount REAL NOT NULL CHECK (amount > 0),
  payment_method_id TEXT NOT NULL REFERENCES payment_methods(id),
  issued_at TEXT NOT NULL
);
CREATE TABLE escalations (
  id TEXT PRIMARY KEY,                  -- E00001
  customer_id TEXT REFERENCES customers(id),
  order_id TEXT,
  summary TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX orders_by_customer ON orders (customer_id);
CREATE INDEX customers_by_name ON customers (name, zip);
CREATE INDEX returns_by_order ON returns (order_id);
CREATE INDEX refunds_by_order ON refunds (order_id);
CREATE INDEX payment_methods_by_customer ON payment_methods (customer_id);
