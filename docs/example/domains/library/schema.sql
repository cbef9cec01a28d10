-- Every table needs a PRIMARY KEY: the diff of an episode identifies rows by it.
CREATE TABLE members (
  id TEXT PRIMARY KEY,            -- M0001
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  fines REAL NOT NULL DEFAULT 0   -- unpaid late fees, in dollars
);
CREATE TABLE books (
  id TEXT PRIMARY KEY,            -- B0001
  title TEXT NOT NULL,
  author TEXT NOT NULL,
  copies INTEGER NOT NULL         -- copies the library owns
);
CREATE TABLE loans (
  id TEXT PRIMARY KEY,            -- L00001, sequential
  member_id TEXT NOT NULL REFERENCES members(id),
  book_id TEXT NOT NULL REFERENCES books(id),
  loaned_at TEXT NOT NULL,
  due_at TEXT NOT NULL,
  returned_at TEXT                -- NULL while the book is out
);
