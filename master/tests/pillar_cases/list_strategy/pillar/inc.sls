include:
  - one
incd:
  svc_opts_b: from-inc
svc:
  opts: {b: inc}
