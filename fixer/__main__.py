from fixer.launch import main

main()
