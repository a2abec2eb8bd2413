pkgs:
  apache: apache2
order: [debian]
