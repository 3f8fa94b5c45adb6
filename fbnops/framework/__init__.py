"""Framework pieces shared by every surface: dtypes, errors, kernel registry, threads."""
