# The configuration files of the case, in its work directory, made from the kernel's
# current values so that applying the states changes no kernel setting.
w="$1"
cur=$(cat /proc/sys/vm/swappiness)
rmem=$(cat /proc/sys/net/ipv4/tcp_rmem)
reserved=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports)
cat > "$w/commented.conf" <<CONF
# Kernel parameters of the test
#vm.swappiness = 1
  # vm.swappiness = 2
kernel.sysrq=1
vm.swappiness =  $cur
net.core.somaxconn = 4096
CONF
printf 'fs.file-max = 100\r\nvm.swappiness = %s0\nline without an equals sign\n# vm.swappiness = 7\nlast = 1' "$cur" > "$w/other.conf"
printf 'kernel.ostype = Linux\n' > "$w/readonly.conf"
printf 'kernel.sysrq = 1' > "$w/noeol.conf"
printf 'net.ipv4.tcp_rmem = %s\n' "$rmem" > "$w/rmem_tabs.conf"
printf 'net.ipv4.ip_local_reserved_ports = %s\n' "$reserved" > "$w/reserved.conf"
