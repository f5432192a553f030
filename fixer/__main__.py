from fixer.cli import main

main()
