# Only a zone this machine does not have: with a real zone the state goes on to read the
# hardware clock's setting, which timedatectl refuses where systemd does not run (an
# exception in Salt's state, a traceback Brine does not copy).
no-such-zone:
  timezone.system:
    - name: Nowhere/Zone

no-such-zone-local-clock:
  timezone.system:
    - name: Nowhere/Zone
    - utc: False
