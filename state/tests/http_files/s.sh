#!/bin/sh
echo "script from http $1"
