-- Corporate travel: employees (with managers, cost centers and travel tiers), who may book for
-- whom, hotels and their room types, bookings and their payments, manager approval requests and
-- escalations to the human travel desk.
CREATE TABLE employees (
  id TEXT PRIMARY KEY,                  -- E0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  department TEXT NOT NULL,
  cost_center TEXT NOT NULL,            -- CC-410
  travel_tier TEXT NOT NULL CHECK (travel_tier IN ('standard', 'senior', 'executive')),
  manager_id TEXT REFERENCES employees(id),  -- NULL only at the top of the company
  home_city TEXT NOT NULL
);
CREATE TABLE delegates (
  principal_id TEXT NOT NULL REFERENCES employees(id),  -- the traveller
  delegate_id TEXT NOT NULL REFERENCES employees(id),   -- may book and change on their behalf
  PRIMARY KEY (principal_id, delegate_id)
);
CREATE TABLE rate_caps (
  tier TEXT NOT NULL,
  city TEXT NOT NULL,                   -- '*' is the default for cities without their own cap
  nightly_cap REAL NOT NULL,
  PRIMARY KEY (tier, city)
);
CREATE TABLE hotels (
  id TEXT PRIMARY KEY,                  -- H0001
  name TEXT NOT NULL,
  city TEXT NOT NULL,
  stars INTEGER NOT NULL CHECK (stars BETWEEN 2 AND 5),
  cancel_window_hours INTEGER NOT NULL  -- free cancellation until this long before check-in (15:00)
);
CREATE TABLE room_types (
  hotel_id TEXT NOT NULL REFERENCES hotels(id),
  code TEXT NOT NULL CHECK (code IN ('economy', 'standard', 'deluxe', 'suite')),
  rank INTEGER NOT NULL,                -- economy 1 < standard 2 < deluxe 3 < suite 4
  nightly_rate REAL NOT NULL,
  rooms INTEGER NOT NULL CHECK (rooms >= 0),  -- rooms of this type the company may book per night
  PRIMARY KEY (hotel_id, code)
);
CREATE TABLE bookings (
  id TEXT PRIMARY KEY,                  -- B000001
  employee_id TEXT NOT NULL REFERENCES employees(id),  -- the traveller
  booked_by TEXT NOT NULL REFERENCES employees(id),    -- the traveller or their delegate
  hotel_id TEXT NOT NULL REFERENCES hotels(id),
  room_type TEXT NOT NULL,
  check_in TEXT NOT NULL,               -- YYYY-MM-DD
  check_out TEXT NOT NULL,
  nightly_rate REAL NOT NULL,           -- locked when booked or when the room type changes
  total REAL NOT NULL,
  cost_center TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('confirmed', 'cancelled', 'completed')),
  cancel_fee REAL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE payments (
  id TEXT PRIMARY KEY,                  -- PY000001
  booking_id TEXT NOT NULL REFERENCES bookings(id),
  kind TEXT NOT NULL CHECK (kind IN ('charge', 'refund')),
  amount REAL NOT NULL CHECK (amount > 0),
  cost_center TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE approval_requests (
  id TEXT PRIMARY KEY,                  -- AR00001
  employee_id TEXT NOT NULL REFERENCES employees(id),
  kind TEXT NOT NULL CHECK (kind IN ('downgrade', 'date_change', 'over_cap')),
  booking_id TEXT REFERENCES bookings(id),  -- NULL for an over-cap room not booked yet
  hotel_id TEXT REFERENCES hotels(id),
  room_type TEXT,                       -- the room type asked for (downgrade, over_cap)
  check_in TEXT,                        -- the dates asked for (date_change, over_cap)
  check_out TEXT,
  reason TEXT NOT NULL,
  approver_id TEXT NOT NULL REFERENCES employees(id),
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
  created_at TEXT NOT NULL,
  decided_at TEXT
);
CREATE TABLE escalations (
  id TEXT PRIMARY KEY,                  -- ES00001
  employee_id TEXT REFERENCES employees(id),
  booking_id TEXT,
  summary TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX employees_by_name ON employees (name);
CREATE INDEX employees_by_manager ON employees (manager_id);
CREATE INDEX delegates_by_delegate ON delegates (delegate_id);
CREATE INDEX hotels_by_city ON hotels (city);
CREATE INDEX bookings_by_employee ON bookings (employee_id);
CREATE INDEX bookings_by_hotel ON bookings (hotel_id, room_type, check_in);
CREATE INDEX payments_by_booking ON payments (booking_id);
CREATE INDEX approvals_by_booking ON approval_requests (booking_id);
CREATE INDEX approvals_by_employee ON approval_requests (employee_id);
