include: just-a-string
bad_include: kept
