from tracekit.cli.app import main

main()
