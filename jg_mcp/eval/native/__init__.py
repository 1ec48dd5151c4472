"""The candidate's source files and native code: the sources copied out of the workspace (`sources`) and built
(`builds`), the libraries its processes map judged by what they bind (`native`, by the rules of `native_rules`,
reading ELF in `elf`), and the failing stubs that cover libraries a goal forbids (`stubs`)."""
