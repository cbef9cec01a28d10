-- Consulting firm operations: employees (level, practice, weekly capacity) and their time off,
-- clients and the rate cards they bill on, engagements with their manager, partner and fee
-- budget, staffing assignments, time entries (submitted, approved, rejected, billed), invoices and
-- their lines, and the approval requests of the firm's approval chain.
-- Money is REAL dollars rounded to 2 decimals, hours REAL; dates are ISO text (YYYY-MM-DD).
CREATE TABLE employees (
  id TEXT PRIMARY KEY,                  -- E0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  level TEXT NOT NULL CHECK (level IN ('analyst', 'consultant', 'senior', 'manager', 'partner')),
  practice TEXT NOT NULL CHECK (practice IN ('strategy', 'operations', 'technology', 'finance')),
  weekly_capacity REAL NOT NULL         -- billable hours a week: 40, or less part-time
);
CREATE TABLE time_off (
  id TEXT PRIMARY KEY,                  -- TO00001
  employee_id TEXT NOT NULL REFERENCES employees(id),
  start_date TEXT NOT NULL,
  end_date TEXT NOT NULL,               -- inclusive
  kind TEXT NOT NULL CHECK (kind IN ('vacation', 'leave', 'training'))
);
CREATE TABLE rate_cards (
  rate_card TEXT NOT NULL,              -- 'standard', or a client's negotiated card such as 'RC-K0012'
  level TEXT NOT NULL,
  hourly_rate REAL NOT NULL,
  PRIMARY KEY (rate_card, level)
);
CREATE TABLE clients (
  id TEXT PRIMARY KEY,                  -- K0001
  name TEXT NOT NULL,
  industry TEXT NOT NULL,
  billing_email TEXT NOT NULL,
  payment_terms_days INTEGER NOT NULL,
  rate_card TEXT NOT NULL               -- the card its engagements bill on
);
CREATE TABLE engagements (
  id TEXT PRIMARY KEY,                  -- EN0001
  client_id TEXT NOT NULL REFERENCES clients(id),
  name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'closed')),
  start_date TEXT NOT NULL,
  end_date TEXT NOT NULL,
  budget REAL NOT NULL,                 -- the most its invoices may bill in fees, in all
  manager_id TEXT NOT NULL REFERENCES employees(id),  -- approves its time
  partner_id TEXT NOT NULL REFERENCES employees(id)   -- approves rate exceptions, large invoices, overruns
);
CREATE TABLE assignments (
  id TEXT PRIMARY KEY,                  -- AS00001
  engagement_id TEXT NOT NULL REFERENCES engagements(id),
  employee_id TEXT NOT NULL REFERENCES employees(id),
  hours_per_week REAL NOT NULL,
  start_date TEXT NOT NULL,
  end_date TEXT NOT NULL,               -- inclusive
  bill_rate REAL NOT NULL,              -- the hourly rate its time is invoiced at
  created_at TEXT NOT NULL
);
CREATE TABLE time_entries (
  id TEXT PRIMARY KEY,                  -- TE000001
  employee_id TEXT NOT NULL REFERENCES employees(id),
  engagement_id TEXT NOT NULL REFERENCES engagements(id),
  work_date TEXT NOT NULL,
  hours REAL NOT NULL CHECK (hours > 0),
  description TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('submitted', 'approved', 'rejected', 'billed')),
  approved_by TEXT REFERENCES employees(id),
  invoice_id TEXT REFERENCES invoices(id),
  note TEXT,                            -- why it was rejected
  updated_at TEXT NOT NULL
);
CREATE TABLE invoices (
  id TEXT PRIMARY KEY,                  -- IN00001
  engagement_id TEXT NOT NULL REFERENCES engagements(id),
  amount REAL NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('draft', 'issued', 'paid', 'void')),
  created_at TEXT NOT NULL,
  issued_at TEXT
);
CREATE TABLE invoice_lines (
  invoice_id TEXT NOT NULL REFERENCES invoices(id),
  line INTEGER NOT NULL,
  employee_id TEXT NOT NULL REFERENCES employees(id),
  time_entry_id TEXT REFERENCES time_entries(id),  -- NULL on invoices older than the time kept here
  hours REAL NOT NULL,
  rate REAL NOT NULL,
  amount REAL NOT NULL,
  PRIMARY KEY (invoice_id, line)
);
CREATE TABLE approvals (
  id TEXT PRIMARY KEY,                  -- AP00001
  kind TEXT NOT NULL CHECK (kind IN ('rate_exception', 'invoice', 'change_order')),
  reference TEXT NOT NULL,              -- the engagement (rate_exception, change_order) or invoice
  employee_id TEXT REFERENCES employees(id),  -- rate_exception: the consultant concerned
  amount REAL NOT NULL,                 -- the rate, the invoice amount, or the budget asked for
  requested_by TEXT NOT NULL REFERENCES employees(id),
  approver_id TEXT NOT NULL REFERENCES employees(id),
  note TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
  created_at TEXT NOT NULL,
  decided_at TEXT
);
CREATE INDEX employees_by_name ON employees (name);
CREATE INDEX time_off_by_employee ON time_off (employee_id);
CREATE INDEX engagements_by_client ON engagements (client_id);
CREATE INDEX assignments_by_engagement ON assignments (engagement_id);
CREATE INDEX assignments_by_employee ON assignments (employee_id, start_date);
CREATE INDEX time_by_engagement ON time_entries (engagement_id, status, work_date);
CREATE INDEX time_by_employee ON time_entries (employee_id, work_date);
CREATE INDEX invoices_by_engagement ON invoices (engagement_id);
CREATE INDEX approvals_by_reference ON approvals (reference);
