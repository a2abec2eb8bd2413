pkgs:
  apache: httpd
