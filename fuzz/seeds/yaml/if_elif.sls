{% if grains.os_family == 'RedHat' %}
family: rh
{% elif grains.os_family == 'Debian' %}
family: deb
{% else %}
family: other
{% endif %}
