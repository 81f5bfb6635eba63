"""The fleet scheduler: a quarter's jobs on shared inventory and the market, as a CP-SAT schedule
improved by LNS, with a column-generation bound. It asks the plan search through the solver's public
names only (vramplan.solver)."""
