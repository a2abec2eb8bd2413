md5: {{ 'salt'|md5 }}
sha: {{ 'salt'|sha256 }}
