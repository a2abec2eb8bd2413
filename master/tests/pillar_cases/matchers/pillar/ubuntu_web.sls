ubuntu_web: {{ grains.os }}
