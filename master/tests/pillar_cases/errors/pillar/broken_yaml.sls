x: [unclosed
y: 1
