"""evalstats: reliability statistics of an evaluation campaign (pass@1 with honest error bars,
pass@k, pass^k, observed k/k, cost per reliable task), a coverage gate, and paired comparison."""
