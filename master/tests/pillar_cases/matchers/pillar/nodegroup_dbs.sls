nodegroup_dbs: yes
