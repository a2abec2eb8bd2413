{#- Only for test=True (sysctl_test): these would change the kernel if applied. #}
default config file:
  sysctl.present:
    - name: vm.swappiness
    - value: 1000

another value:
  sysctl.present:
    - name: vm.swappiness
    - value: 1000
    - config: {{ grains.work }}/commented.conf

empty in the kernel:
  sysctl.present:
    - name: net.ipv4.ip_local_reserved_ports
    - value: 1
    - config: {{ grains.work }}/reserved.conf

whitespace only differs:
  sysctl.present:
    - name: net.ipv4.tcp_rmem
    - value: "  4096    1  2  "
    - config: {{ grains.work }}/missing.conf
