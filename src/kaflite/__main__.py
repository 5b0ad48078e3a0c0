"""`python -m kaflite ...` is the `kaflite` command line."""

from kaflite.cli import main

if __name__ == "__main__":
    main()
