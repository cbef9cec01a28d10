-- Customer support: customers, their shipments, carrier exceptions and claims, support tickets
-- with notes, goodwill credits and escalations to a human team.
CREATE TABLE queues (
  id TEXT PRIMARY KEY,                  -- general, shipping, billing, returns, escalations
  name TEXT NOT NULL,
  description TEXT NOT NULL
);
CREATE TABLE agents (
  id TEXT PRIMARY KEY,                  -- AG001
  name TEXT NOT NULL,
  queue TEXT NOT NULL REFERENCES queues(id)
);
CREATE TABLE customers (
  id TEXT PRIMARY KEY,                  -- C0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  phone TEXT NOT NULL,
  zip TEXT NOT NULL,
  tier TEXT NOT NULL CHECK (tier IN ('standard', 'plus', 'premier')),
  created_at TEXT NOT NULL
);
CREATE TABLE shipments (
  id TEXT PRIMARY KEY,                  -- S00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  order_ref TEXT NOT NULL,              -- the store's order number, e.g. ORD-551204
  carrier TEXT NOT NULL CHECK (carrier IN ('UPS', 'FedEx', 'USPS', 'DHL')),
  tracking_number TEXT NOT NULL UNIQUE,
  service TEXT NOT NULL CHECK (service IN ('ground', 'express')),
  status TEXT NOT NULL CHECK (status IN ('label_created', 'in_transit', 'out_for_delivery',
                                         'delivered', 'returned')),
  declared_value REAL NOT NULL CHECK (declared_value > 0),
  shipped_at TEXT,
  last_scan_at TEXT,
  last_scan_location TEXT,
  delivered_at TEXT
);
CREATE TABLE carrier_exceptions (
  id TEXT PRIMARY KEY,                  -- X00001
  shipment_id TEXT NOT NULL REFERENCES shipments(id),
  kind TEXT NOT NULL CHECK (kind IN ('lost', 'damaged', 'delayed', 'address_issue')),
  status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
  opened_by TEXT NOT NULL CHECK (opened_by IN ('carrier', 'support')),
  opened_at TEXT NOT NULL,
  resolved_at TEXT,
  resolution TEXT CHECK (resolution IN ('delivered', 'reshipped', 'claim_paid', 'withdrawn'))
);
CREATE TABLE claims (
  id TEXT PRIMARY KEY,                  -- CL00001
  exception_id TEXT NOT NULL REFERENCES carrier_exceptions(id),
  amount REAL NOT NULL CHECK (amount > 0),
  status TEXT NOT NULL CHECK (status IN ('filed', 'paid', 'denied')),
  filed_at TEXT NOT NULL,
  decided_at TEXT
);
CREATE TABLE tickets (
  id TEXT PRIMARY KEY,                  -- T00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  shipment_id TEXT REFERENCES shipments(id),
  subject TEXT NOT NULL,
  category TEXT NOT NULL CHECK (category IN ('shipping', 'damaged', 'billing', 'returns',
                                             'account', 'other')),
  priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  status TEXT NOT NULL CHECK (status IN ('new', 'open', 'pending', 'resolved')),
  queue TEXT NOT NULL REFERENCES queues(id),
  assignee TEXT REFERENCES agents(id),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  resolved_at TEXT,
  resolution TEXT
);
CREATE TABLE ticket_notes (
  id TEXT PRIMARY KEY,                  -- N000001
  ticket_id TEXT NOT NULL REFERENCES tickets(id),
  author TEXT NOT NULL,                 -- 'customer', an agent id, or 'assistant' (you)
  visibility TEXT NOT NULL CHECK (visibility IN ('internal', 'customer')),
  body TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE credits (
  id TEXT PRIMARY KEY,                  -- CR00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  ticket_id TEXT NOT NULL REFERENCES tickets(id),
  amount REAL NOT NULL CHECK (amount > 0),
  reason TEXT NOT NULL CHECK (reason IN ('delay', 'damage', 'loss', 'goodwill')),
  issued_at TEXT NOT NULL
);
CREATE TABLE escalations (
  id TEXT PRIMARY KEY,                  -- E00001
  ticket_id TEXT NOT NULL REFERENCES tickets(id),
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX customers_by_name ON customers (name, zip);
CREATE INDEX shipments_by_customer ON shipments (customer_id);
CREATE INDEX exceptions_by_shipment ON carrier_exceptions (shipment_id);
CREATE INDEX claims_by_exception ON claims (exception_id);
CREATE INDEX tickets_by_customer ON tickets (customer_id);
CREATE INDEX tickets_by_shipment ON tickets (shipment_id);
CREATE INDEX tickets_by_queue ON tickets (queue, status);
CREATE INDEX notes_by_ticket ON ticket_notes (ticket_id);
CREATE INDEX credits_by_ticket ON credits (ticket_id);
CREATE INDEX escalations_by_ticket ON escalations (ticket_id);
