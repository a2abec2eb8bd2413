include:
  - .settings
  - app.defaults:
      defaults:
        level: info
      key: app:logging
app:
  name: myapp
  settings_from_init: true
