# An fstab of the case's own (nothing is mounted: each state says mount: False but one,
# whose file system type no kernel has).
printf '# /etc/fstab: static file system information.\nUUID=1111-2222\t/\text4\terrors=remount-ro\t0 1\n/dev/sdb1 /data ext4 defaults,noatime 0 2\ntmpfs /run/cache tmpfs size=10m 0 0\n/dev/sdc1 /old xfs defaults\nnot an entry\n' > "$1/fstab"
