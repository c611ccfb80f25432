from _common import delivered, raises

roman = delivered("roman")
known = {
    1: "I",
    4: "IV",
    9: "IX",
    14: "XIV",
    40: "XL",
    90: "XC",
    400: "CD",
    944: "CMXLIV",
    1994: "MCMXCIV",
    2024: "MMXXIV",
    3999: "MMMCMXCIX",
}
for number, numeral in known.items():
    assert roman.to_roman(number) == numeral, (number, roman.to_roman(number))
    assert roman.from_roman(numeral) == number, (numeral, roman.from_roman(numeral))
for number in range(1, 4000):
    assert roman.from_roman(roman.to_roman(number)) == number, number
for bad in (0, -1, 4000):
    assert raises(ValueError, roman.to_roman, bad), bad
print("roman: ok")
