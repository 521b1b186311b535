from curate.cli.app import main

main()
