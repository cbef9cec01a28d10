"""bucket: place each candidate task in a difficulty band from its probe attempts, and keep the
bands that training learns from."""
