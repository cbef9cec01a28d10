-- Auto insurance: policyholders, their policies (term, premium paid through, lapse and
-- reinstatement), the vehicles and drivers on each policy, each vehicle's coverages with their
-- limits and deductibles, claims with the appraiser's estimate per coverage, claim payments,
-- premium payments, adjuster reviews and escalations to a human.
-- Money is REAL dollars rounded to 2 decimals; dates are ISO text (YYYY-MM-DD), times
-- YYYY-MM-DDTHH:MM:SS.
CREATE TABLE customers (
  id TEXT PRIMARY KEY,                  -- C0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  phone TEXT NOT NULL,
  zip TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE policies (
  id TEXT PRIMARY KEY,                  -- P00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  status TEXT NOT NULL CHECK (status IN ('active', 'lapsed')),
  effective_date TEXT NOT NULL,         -- first day of the current term
  expiration_date TEXT NOT NULL,        -- last day of the current term
  monthly_premium REAL NOT NULL,
  paid_through TEXT NOT NULL,           -- premium paid up to and including this day
  lapsed_on TEXT,                       -- first day without cover after an unpaid premium
  reinstated_on TEXT,                   -- cover resumed this day; [lapsed_on, reinstated_on) stays uncovered
  updated_at TEXT NOT NULL
);
CREATE TABLE vehicles (
  id TEXT PRIMARY KEY,                  -- V00001
  policy_id TEXT NOT NULL REFERENCES policies(id),
  vin TEXT NOT NULL UNIQUE,
  year INTEGER NOT NULL,
  make TEXT NOT NULL,
  model TEXT NOT NULL
);
CREATE TABLE drivers (
  id TEXT PRIMARY KEY,                  -- DR00001
  policy_id TEXT NOT NULL REFERENCES policies(id),
  name TEXT NOT NULL,
  license_number TEXT NOT NULL,
  birth_date TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('listed', 'excluded', 'removed')),  -- excluded: never covered
  updated_at TEXT NOT NULL
);
CREATE TABLE coverages (
  vehicle_id TEXT NOT NULL REFERENCES vehicles(id),
  kind TEXT NOT NULL CHECK (kind IN ('liability', 'collision', 'comprehensive', 'rental', 'roadside')),
  limit_amount REAL NOT NULL,           -- most paid per claim under this coverage
  deductible REAL NOT NULL,             -- taken off each claim's payment (0 for rental, roadside, liability)
  updated_at TEXT NOT NULL,
  PRIMARY KEY (vehicle_id, kind)
);
CREATE TABLE claims (
  id TEXT PRIMARY KEY,                  -- CL00001
  policy_id TEXT NOT NULL REFERENCES policies(id),
  vehicle_id TEXT NOT NULL REFERENCES vehicles(id),
  driver_id TEXT REFERENCES drivers(id),  -- who drove; NULL when nobody did (theft, hail, parked)
  loss_date TEXT NOT NULL,
  loss_type TEXT NOT NULL CHECK (loss_type IN ('collision', 'theft', 'weather', 'glass', 'vandalism', 'animal')),
  description TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open', 'closed', 'denied', 'withdrawn')),
  denial_reason TEXT,                   -- not_in_force, excluded_driver, not_covered
  reported_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE estimates (
  claim_id TEXT NOT NULL REFERENCES claims(id),
  coverage TEXT NOT NULL,               -- the coverage the appraised loss falls under
  amount REAL NOT NULL CHECK (amount > 0),  -- appraised loss before deductible and limit
  note TEXT NOT NULL,                   -- what the appraiser found
  PRIMARY KEY (claim_id, coverage)
);
CREATE TABLE payments (
  id TEXT PRIMARY KEY,                  -- PY00001
  claim_id TEXT NOT NULL REFERENCES claims(id),
  coverage TEXT NOT NULL,
  amount REAL NOT NULL CHECK (amount > 0),
  created_at TEXT NOT NULL
);
CREATE TABLE premium_payments (
  id TEXT PRIMARY KEY,                  -- PP000001
  policy_id TEXT NOT NULL REFERENCES policies(id),
  amount REAL NOT NULL CHECK (amount > 0),
  covers_through TEXT NOT NULL,         -- the policy's paid_through after this payment
  paid_at TEXT NOT NULL
);
CREATE TABLE adjuster_reviews (
  id TEXT PRIMARY KEY,                  -- AR00001
  claim_id TEXT NOT NULL REFERENCES claims(id),
  amount REAL NOT NULL,                 -- the total payout of the claim asked for
  reason TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
  created_at TEXT NOT NULL,
  decided_at TEXT
);
CREATE TABLE escalations (
  id TEXT PRIMARY KEY,                  -- E00001
  customer_id TEXT REFERENCES customers(id),
  reference TEXT,                       -- the policy, vehicle, driver or claim concerned
  summary TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX customers_by_name ON customers (name, zip);
CREATE INDEX policies_by_customer ON policies (customer_id);
CREATE INDEX vehicles_by_policy ON vehicles (policy_id);
CREATE INDEX drivers_by_policy ON drivers (policy_id);
CREATE INDEX claims_by_policy ON claims (policy_id, loss_date);
CREATE INDEX claims_by_vehicle ON claims (vehicle_id, loss_date);
CREATE INDEX payments_by_claim ON payments (claim_id);
CREATE INDEX premium_payments_by_policy ON premium_payments (policy_id);
CREATE INDEX reviews_by_claim ON adjuster_reviews (claim_id);
