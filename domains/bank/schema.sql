-- Bank (an app-only neobank): customers, their deposit accounts and their physical and virtual
-- debit cards, card transactions, disputes, transfers between own accounts, payees and instant
-- transfers to them, savings pots, limit-increase requests, travel notices and escalations to a
-- human.
-- Money is REAL dollars rounded to 2 decimals everywhere; `amount` columns are always positive
-- (the transaction's `kind` says which way the money moved). Dates are ISO text (UTC, no zone).
CREATE TABLE customers (
  id TEXT PRIMARY KEY,                  -- C0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  phone TEXT NOT NULL,
  zip TEXT NOT NULL,
  kyc_level INTEGER NOT NULL CHECK (kyc_level IN (1, 2, 3)),  -- caps the card spending limit
  created_at TEXT NOT NULL
);
CREATE TABLE accounts (
  id TEXT PRIMARY KEY,                  -- A00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  type TEXT NOT NULL CHECK (type IN ('checking', 'savings')),
  balance REAL NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'frozen', 'closed')),
  daily_transfer_limit REAL NOT NULL,   -- total outgoing transfers per calendar day
  opened_at TEXT NOT NULL
);
CREATE TABLE cards (
  id TEXT PRIMARY KEY,                  -- K00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  last4 TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'frozen', 'cancelled')),
  spending_limit REAL NOT NULL,         -- daily card spending limit
  expires TEXT NOT NULL,                -- YYYY-MM
  cancel_reason TEXT,
  replaces TEXT REFERENCES cards(id),   -- the card this one replaced
  updated_at TEXT NOT NULL,
  form TEXT NOT NULL DEFAULT 'physical' CHECK (form IN ('physical', 'virtual'))  -- virtual: in the app only
);
CREATE TABLE transactions (
  id TEXT PRIMARY KEY,                  -- T0000001
  account_id TEXT NOT NULL REFERENCES accounts(id),
  card_id TEXT REFERENCES cards(id),    -- card purchases only
  kind TEXT NOT NULL CHECK (kind IN ('purchase', 'deposit', 'fee', 'provisional_credit')),
  merchant TEXT NOT NULL,
  amount REAL NOT NULL CHECK (amount > 0),
  status TEXT NOT NULL CHECK (status IN ('pending', 'posted', 'disputed')),
  posted_at TEXT NOT NULL               -- the transaction date
);
CREATE TABLE disputes (
  id TEXT PRIMARY KEY,                  -- D00001
  transaction_id TEXT NOT NULL REFERENCES transactions(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  reason TEXT NOT NULL CHECK (reason IN ('fraud', 'not_received', 'duplicate', 'wrong_amount')),
  amount REAL NOT NULL CHECK (amount > 0),
  status TEXT NOT NULL CHECK (status IN ('open', 'resolved_customer', 'resolved_merchant')),
  provisional_credit REAL NOT NULL DEFAULT 0,
  card_status_at_open TEXT,             -- the card's status when the dispute was opened
  note TEXT,
  opened_at TEXT NOT NULL
);
CREATE TABLE transfers (
  id TEXT PRIMARY KEY,                  -- TR00001
  from_account_id TEXT NOT NULL REFERENCES accounts(id),
  to_account_id TEXT NOT NULL REFERENCES accounts(id),
  amount REAL NOT NULL CHECK (amount > 0),
  memo TEXT,
  created_at TEXT NOT NULL
);
CREATE TABLE payees (
  id TEXT PRIMARY KEY,                  -- PE00001
  customer_id TEXT NOT NULL REFERENCES customers(id),
  name TEXT NOT NULL,
  account_number TEXT NOT NULL,         -- the payee's account at their own bank
  bank TEXT NOT NULL,
  created_at TEXT NOT NULL              -- a payee added in the last 24 hours is still new
);
CREATE TABLE instant_transfers (
  id TEXT PRIMARY KEY,                  -- IT00001
  account_id TEXT NOT NULL REFERENCES accounts(id),
  payee_id TEXT NOT NULL REFERENCES payees(id),
  amount REAL NOT NULL CHECK (amount > 0),
  reference TEXT,
  created_at TEXT NOT NULL              -- settled at once; cannot be reversed
);
CREATE TABLE pots (
  id TEXT PRIMARY KEY,                  -- PT00001
  account_id TEXT NOT NULL REFERENCES accounts(id),  -- the account its money is set aside from
  name TEXT NOT NULL,
  balance REAL NOT NULL,
  goal REAL,
  locked_until TEXT,                    -- YYYY-MM-DD: no money leaves the pot before this day
  status TEXT NOT NULL CHECK (status IN ('open', 'closed')),
  created_at TEXT NOT NULL
);
CREATE TABLE pot_movements (
  id TEXT PRIMARY KEY,                  -- PM00001
  pot_id TEXT NOT NULL REFERENCES pots(id),
  direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
  amount REAL NOT NULL CHECK (amount > 0),
  created_at TEXT NOT NULL
);
CREATE TABLE limit_requests (
  id TEXT PRIMARY KEY,                  -- LR00001
  card_id TEXT NOT NULL REFERENCES cards(id),
  current_limit REAL NOT NULL,
  requested_limit REAL NOT NULL,
  reason TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
  created_at TEXT NOT NULL
);
CREATE TABLE travel_notices (
  id TEXT PRIMARY KEY,                  -- TN00001
  card_id TEXT NOT NULL REFERENCES cards(id),
  destination TEXT NOT NULL,
  start_date TEXT NOT NULL,             -- YYYY-MM-DD
  end_date TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE escalations (
  id TEXT PRIMARY KEY,                  -- E00001
  customer_id TEXT REFERENCES customers(id),
  reference TEXT,                       -- the account, card, transaction or dispute concerned
  summary TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX customers_by_name ON customers (name, zip);
CREATE INDEX accounts_by_customer ON accounts (customer_id);
CREATE INDEX cards_by_customer ON cards (customer_id);
CREATE INDEX transactions_by_account ON transactions (account_id, posted_at);
CREATE INDEX disputes_by_transaction ON disputes (transaction_id);
CREATE INDEX transfers_by_source ON transfers (from_account_id, created_at);
CREATE INDEX limit_requests_by_card ON limit_requests (card_id);
CREATE INDEX payees_by_customer ON payees (customer_id);
CREATE INDEX instant_transfers_by_account ON instant_transfers (account_id, created_at);
CREATE INDEX pots_by_account ON pots (account_id);
CREATE INDEX pot_movements_by_pot ON pot_movements (pot_id);
CREATE INDEX travel_notices_by_card ON travel_notices (card_id);
