cd "$1"
printf 'line one\nline two\n' > app.txt
printf 'no newline at end' > app_nonl.txt
printf 'head\n' > pre.txt
printf 'one\r\ntwo\r\n' > crlf.txt
printf '# settings\n  port = 80\n#host = a\nhost = b\nname=x\n' > comment.conf
printf 'PermitRootLogin yes\nPort 22\nport 23\n' > sshd
printf 'foo foo foo\n' > count.txt
printf 'header\n#-- start managed zone --\nold\n#-- end managed zone --\nfooter\n' > block.txt
printf 'top\nbottom\n' > block2.txt
printf 'first\r\nlast\r\n' > block_crlf.txt
printf 'alpha\n  beta\ngamma\ndelta\n' > line.txt
printf 'a=1\n#b=2\nc=3\nc=4\nD=x\n' > kv.conf
printf '  key = old\nother = 1\n' > kv_ws.conf
mkdir dir
chmod 640 line.txt
printf 'x = 1\n  y = 2\n' > slash.conf
printf 'a\n#-- start managed zone --\nold\ntext before #-- end managed zone -- after\nz\n' > block_end.txt
printf 'path=x\n' > win.txt
printf 'k=1\r\nk=2\r\nk=3\r\n#k=4\r\n' > kv_crlf.conf
printf 'x\n' > block3.txt
printf '#opt = 1\n' > uncomment.conf
