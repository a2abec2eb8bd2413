cd "$1"
printf 'server {\n    listen 80;\n    root /var/www;\n}\n' > nginx.conf
printf 'a\nb\nc\n' > abc.txt
printf 'x=1\nx=2\nx=3\n' > count.txt
printf 'head\n# BEGIN\nold\n# END\ntail\n' > block.txt
printf 'Key1: v1\n;Key2: v2\n' > kv.conf
printf 'opt1\nopt2\n' > com.txt
