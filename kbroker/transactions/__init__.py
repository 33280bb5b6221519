"""Transactions: the TransactionCoordinator and its ``__transaction_state`` records."""
