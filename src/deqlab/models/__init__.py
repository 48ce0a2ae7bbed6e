"""DEQ model families: the ReLU DEQ (Ling et al. 2023), the monotone DEQ (thesis), the DELM (Kawaguchi 2021)."""
