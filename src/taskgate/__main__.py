from taskgate.cli.main import exit_with, main

exit_with(main(own_process=True))
