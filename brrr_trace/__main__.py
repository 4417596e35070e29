from brrr_trace.cli import main

raise SystemExit(main())
