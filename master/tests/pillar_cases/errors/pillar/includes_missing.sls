include:
  - nothere
  - good
im: {m2: true}
