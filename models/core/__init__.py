"""The vocabulary every layer shares: jobs, plans, layouts, catalogue rows, results, errors, numbers and units."""
