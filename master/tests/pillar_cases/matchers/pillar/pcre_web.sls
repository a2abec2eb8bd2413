pcre_web: matched
