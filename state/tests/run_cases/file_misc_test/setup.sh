touch "$1/present"
