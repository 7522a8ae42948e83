"""What runs inside an image as well as here: standard library only (a test holds them to it),
copied into every image next to nvbuild.sh."""
