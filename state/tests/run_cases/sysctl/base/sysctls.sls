{#- The kernel's current values, read through the links to /proc/sys beside this file (the
    test's renderers have no execution functions). Every state here either sets a parameter
    to the value it already has, or fails before the kernel changes: nothing run here changes
    the machine's settings. Every configuration file is in the case's work directory. #}
{%- import_text 'swappiness' as swappiness %}
{%- import_text 'tcp_rmem' as tcp_rmem %}
{%- import_text 'reserved_ports' as reserved_ports %}
{%- set cur = swappiness | trim %}
{%- set rmem = tcp_rmem | trim | replace('\t', ' ') %}
{%- set reserved = reserved_ports | trim %}

# A parameter the kernel does not have: written into a new file, then refused.
missing key:
  sysctl.present:
    - name: brine.no.such.key
    - value: 1
    - config: {{ grains.work }}/missing.conf

# Already set in the kernel and in a file with comments and other parameters.
already set:
  sysctl.present:
    - name: vm.swappiness
    - value: {{ cur }}
    - config: {{ grains.work }}/commented.conf

# Persisted into a new file in a new directory (the kernel is given the value it has).
fresh file:
  sysctl.present:
    - name: vm.swappiness
    - value: {{ cur }}
    - config: {{ grains.work }}/new/sysctl.d/99-salt.conf

# The file gives the parameter another value: its line is rewritten, the others kept.
rewritten line:
  sysctl.present:
    - name: vm.swappiness
    - value: {{ cur }}
    - config: {{ grains.work }}/other.conf

# A value the kernel refuses (it keeps its own): the file is written, the state fails.
bad value:
  sysctl.present:
    - name: vm.swappiness
    - value: not-a-number
    - config: {{ grains.work }}/bad.conf

# A read-only parameter whose value is the same everywhere: already in the file.
read-only set:
  sysctl.present:
    - name: kernel.ostype
    - value: Linux
    - config: {{ grains.work }}/readonly.conf

# The same added after a last line without an end of line: sysctl cannot write it.
read-only appended:
  sysctl.present:
    - name: kernel.ostype
    - value: Linux
    - config: {{ grains.work }}/noeol.conf

# Several numbers: spaces asked for, tabs in the kernel.
several numbers:
  sysctl.present:
    - name: net.ipv4.tcp_rmem
    - value: "{{ rmem }}"
    - config: {{ grains.work }}/rmem.conf

several numbers in the file:
  sysctl.present:
    - name: net.ipv4.tcp_rmem
    - value: "{{ rmem }}"
    - config: {{ grains.work }}/rmem_tabs.conf

# A parameter whose value is usually empty, already in the file.
empty value:
  sysctl.present:
    - name: net.ipv4.ip_local_reserved_ports
    - value: "{{ reserved }}"
    - config: {{ grains.work }}/reserved.conf

# The configuration file is a directory: neither read nor written.
config is a directory:
  sysctl.present:
    - name: vm.swappiness
    - value: {{ cur }}
    - config: {{ grains.work }}
