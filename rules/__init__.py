"""rulekit's bundled rules: importing this package registers them all."""
