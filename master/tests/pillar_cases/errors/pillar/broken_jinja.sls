x: {{ grains["os"] 
