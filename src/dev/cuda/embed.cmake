# cmake -DIN=kernels.fatbin -DOUT=kernels_fatbin.c -P embed.cmake: the
# kernels' fatbin as a C array (moex_cuda_fatbin) for dev_cuda_driver.c,
# which hands it to cuModuleLoadData.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n" hex "${hex}")
file(WRITE "${OUT}" "/* Generated from ${IN} by src/dev/cuda/embed.cmake. */\n"
  "extern const unsigned char moex_cuda_fatbin[];\n"
  "extern const unsigned long long moex_cuda_fatbin_bytes;\n"
  "__attribute__((aligned(16))) const unsigned char moex_cuda_fatbin[] = {\n${hex}\n};\n"
  "const unsigned long long moex_cuda_fatbin_bytes = ${bytes};\n")
