from _common import delivered, raises

Account = delivered("account").Account
account = Account()
assert account.balance == 0
account.deposit(100)
account.withdraw(30)
assert account.balance == 70
assert raises(ValueError, account.withdraw, 100)
assert account.balance == 70
assert raises(ValueError, account.deposit, 0)
assert raises(ValueError, account.deposit, -5)
assert raises(ValueError, account.withdraw, -1)
account.withdraw(70)
assert account.balance == 0
print("account: ok")
