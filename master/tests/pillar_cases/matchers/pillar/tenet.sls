tenet: "10/8"
